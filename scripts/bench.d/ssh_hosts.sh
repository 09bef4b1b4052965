#!/usr/bin/env bash
# Five sshd hosts on 127.0.0.2-6 (free ports) for `scripts/bench hosts`.
#   ssh_hosts.sh start DIR   writes DIR/ssh_config (Host h1..h5) and DIR/hK/sshd.log
#   ssh_hosts.sh stop DIR    stops them (by the pids it recorded)
# The remote user is BENCH_SSH_USER, else (as root) `tkbench`, made once with
# a stock home: every command starts the user's shell, which reads its rc
# files, and root's own (pyenv, nvm, conda...) would be measured instead of
# the tools. Not root: the current user.
set -euo pipefail
cmd=$1 dir=$2
user=${BENCH_SSH_USER:-}
if [ -z "$user" ]; then
  if [ "$(id -u)" -eq 0 ]; then user=tkbench; else user=$(id -un); fi
fi
case "$cmd" in
  start)
    command -v /usr/sbin/sshd >/dev/null || { echo "needs openssh-server (scripts/install-deps)"; exit 1; }
    rm -rf "$dir"; mkdir -p "$dir" /run/sshd
    ssh-keygen -q -t ed25519 -N "" -f "$dir/client"
    cp "$dir/client.pub" "$dir/authorized_keys"
    if [ "$user" = tkbench ] && ! id tkbench >/dev/null 2>&1; then
      # '*': no password can log in, and the account is not locked (sshd refuses locked ones)
      useradd --create-home --shell /bin/bash --password '*' tkbench
    fi
    if [ "$user" != "$(id -un)" ]; then
      home=$(getent passwd "$user" | cut -d: -f6)
      install -d -o "$user" -m 700 "$home/.ssh"
      install -o "$user" -m 600 "$dir/client.pub" "$home/.ssh/authorized_keys"
    fi
    : > "$dir/known_hosts"; : > "$dir/ssh_config"
    for k in 1 2 3 4 5; do
      h="$dir/h$k" addr="127.0.0.$((k + 1))"
      mkdir -p "$h"
      ssh-keygen -q -t ed25519 -N "" -f "$h/hostkey"
      port=$(python3 -c "import socket; s=socket.socket(); s.bind(('$addr', 0)); print(s.getsockname()[1])")
      cat > "$h/sshd_config" <<CONF
Port $port
ListenAddress $addr
HostKey $h/hostkey
AuthorizedKeysFile $dir/authorized_keys .ssh/authorized_keys
PidFile none
StrictModes no
UsePAM no
PrintMotd no
PrintLastLog no
PermitRootLogin prohibit-password
MaxSessions 100
MaxStartups 100
LogLevel VERBOSE
CONF
      /usr/sbin/sshd -D -e -f "$h/sshd_config" 2> "$h/sshd.log" &
      echo $! > "$h/pid"
      echo "[$addr]:$port $(cut -d' ' -f1,2 "$h/hostkey.pub")" >> "$dir/known_hosts"
      printf 'Host h%d\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n' \
        "$k" "$addr" "$port" "$user" "$dir/client" "$dir/known_hosts" >> "$dir/ssh_config"
      for _ in $(seq 100); do (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null && break; sleep 0.05; done
    done
    echo "ssh hosts: remote user $user (see scripts/bench.d/ssh_hosts.sh)"
    ;;
  stop)
    for p in "$dir"/h*/pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
    ;;
esac
