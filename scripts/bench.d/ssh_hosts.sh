#!/usr/bin/env bash
# Five sshd hosts on 127.0.0.2-6 (free ports) for `scripts/bench hosts`.
#   ssh_hosts.sh start DIR   writes DIR/ssh_config (Host h1..h5) and DIR/hK/sshd.log
#   ssh_hosts.sh stop DIR    stops them (by the pids it recorded)
set -euo pipefail
cmd=$1 dir=$2
case "$cmd" in
  start)
    command -v /usr/sbin/sshd >/dev/null || { echo "needs openssh-server (scripts/install-deps)"; exit 1; }
    rm -rf "$dir"; mkdir -p "$dir" /run/sshd
    ssh-keygen -q -t ed25519 -N "" -f "$dir/client"
    cp "$dir/client.pub" "$dir/authorized_keys"
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
AuthorizedKeysFile $dir/authorized_keys
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
        "$k" "$addr" "$port" "$(id -un)" "$dir/client" "$dir/known_hosts" >> "$dir/ssh_config"
      for _ in $(seq 100); do (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null && break; sleep 0.05; done
    done
    ;;
  stop)
    for p in "$dir"/h*/pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
    ;;
esac
