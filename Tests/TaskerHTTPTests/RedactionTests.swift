import Testing
@testable import TaskerHTTP

/// What a run's record keeps of its command line: secrets as `***`, the
/// rest as given.
@Suite struct RedactionTests {
    @Test func argumentsHideURLPasswordsSecretFlagsAndTheirValues() {
        #expect(Redaction.arguments([
            "postgres://app:pw1@db/app", "--api-token=t2", "--Password=p3", "--token", "t4", "--token", "--next",
            "token=t5", "host=db password=p6 user=app", "Bearer t7", "plain", "--verbose", "v", "",
            "https://h/x?token=t8&q=1", "http://u:p9@[::1]:8080/p", "postgres://u:pa/ss@db/app",
            "x=http://a:p10@h,http://c:p11@k", "https://h/cb?next=https://u:p12@x/",
            "https://registry.example/@scope/pkg", "https://h:8443/@x", "--token",
        ]) == [
            "postgres://***@db/app", "--api-token=***", "--Password=***", "--token", "***", "--token", "--next",
            "token=***", "host=db password=*** user=app", "Bearer ***", "plain", "--verbose", "v", "",
            "https://h/x?token=***&q=1", "http://***@[::1]:8080/p", "postgres://***@db/app",
            "x=http://***@h,http://***@k", "https://h/cb?next=https://***@x/",
            "https://registry.example/@scope/pkg", "https://h:8443/@x", "--token",
        ])
    }

    /// `curl -H Bearer TOKEN` style: the token as the argument after one
    /// whose last word is `Bearer`; a flag after it is not a token.
    @Test func theArgumentAfterBearerIsHidden() {
        #expect(Redaction.arguments(["-H", "Bearer", "t1", "Authorization: bearer", "t2", "BEARER ", "t3", "Bearer",
                                     "--next", "notbearer", "v", "Bearers", "v2"])
                == ["-H", "Bearer", "***", "Authorization: bearer", "***", "BEARER ", "***", "Bearer", "--next",
                    "notbearer", "v", "Bearers", "v2"])
    }

    /// A header given as an argument or inside a command line: its
    /// credential is hidden (and a secret of the run), the scheme stays;
    /// the word "basic" or "token" elsewhere is only a word.
    @Test func headerCredentialsInTextAreHidden() {
        #expect(Redaction.arguments(["Authorization: Basic dXNlcjpwYXNz", "Authorization: token ghp_abc123",
                                     "authorization: opaque-cred", "X-Api-Key: k-9876", "curl -H 'Cookie: sid=s3cr3t' h",
                                     "--mode basic fast", "a token here"])
                == ["Authorization: Basic ***", "Authorization: token ***", "authorization: ***", "X-Api-Key: ***",
                    "curl -H 'Cookie: *** h", "--mode basic fast", "a token here"])
        #expect(Redaction.secrets(arguments: ["Authorization: Basic dXNlcjpwYXNz", "--mode basic fast"], variables: [:])
                == ["dXNlcjpwYXNz"])
        // a query value also as a form decodes it
        #expect(Redaction.secrets(arguments: ["https://h/x?access_token=Tok%2Fplus+sp"], variables: [:])
                == ["Tok%2Fplus+sp", "Tok/plus+sp", "Tok/plus sp"])
    }

    @Test func varsWithSecretKeysAreHiddenOthersKeepAllButURLPasswords() {
        let vars = ["GITHUB_PAT": "a", "gh-pat": "b", "myPat": "c", "bearer": "d", "Api_Key": "e", "DSN": "f",
                    "db_password": "g", "client_secret": "h", "AUTH": "i", "empty_token": "",
                    "monkey": "j", "path": "/usr/bin", "pattern": "*.lua", "url": "https://u:k@h/x", "name": "bob"]
        #expect(Redaction.variables(vars) == [
            "GITHUB_PAT": "***", "gh-pat": "***", "myPat": "***", "bearer": "***", "Api_Key": "***", "DSN": "***",
            "db_password": "***", "client_secret": "***", "AUTH": "***", "empty_token": "",
            "monkey": "***", "path": "/usr/bin", "pattern": "*.lua", "url": "https://***@h/x", "name": "bob",
        ])
    }
}
