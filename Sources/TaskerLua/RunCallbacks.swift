/// Who the runtime tells of a run's moments; each is called on the loop.
public struct RunCallbacks {
    /// Once the main chunk has ended (returned or failed): a worker claims
    /// jobs only once the file's definitions exist.
    public var mainDone: (() -> Void)?
    /// After each successful reload of a used file, with the file.
    public var reloaded: ((String) -> Void)?
    /// The run has ended, with its result.
    var finished: ((RunResult) -> Void)?

    public init() {}
}
