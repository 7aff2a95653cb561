#!/usr/bin/env bash
# Best effort: start the local Postgres (127.0.0.1:5432), NATS with JetStream (127.0.0.1:4222) and Redis
# (127.0.0.1:6379) that the networked store's, the broker's and the KV pool's tests use, where they are installed but not running. Never fails: a test
# whose server is unreachable says it is skipped and why. CI (.ci/run) calls it; `npm test` does not need it.
set -uo pipefail

say() { echo "services: $*"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if port_open 5432; then
  say "postgres answers on 127.0.0.1:5432"
elif command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    say "starting postgres $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || say "could not start postgres $version"
  done
else
  say "no postgres on 127.0.0.1:5432 and none installed here; the Postgres tests will be skipped"
fi

if port_open 4222; then
  say "nats answers on 127.0.0.1:4222"
elif command -v nats-server >/dev/null 2>&1; then
  say "starting nats-server with JetStream"
  store=/var/lib/nats-server
  mkdir -p "$store" 2>/dev/null || store="${TMPDIR:-/tmp}/arbor-nats"
  if command -v start-stop-daemon >/dev/null 2>&1; then
    start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- -a 127.0.0.1 -p 4222 -js -sd "$store" || say "could not start nats-server"
  else
    nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$store" >/dev/null 2>&1 &
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do port_open 4222 && break; sleep 0.5; done
else
  say "no nats on 127.0.0.1:4222 and none installed here; the broker tests will be skipped"
fi
if port_open 6379; then
  say "redis answers on 127.0.0.1:6379"
elif command -v redis-server >/dev/null 2>&1; then
  say "starting redis-server"
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save "" >/dev/null || say "could not start redis-server"
  for _ in 1 2 3 4 5 6 7 8 9 10; do port_open 6379 && break; sleep 0.5; done
else
  say "no redis on 127.0.0.1:6379 and none installed here; the KV pool's tests will be skipped"
fi
exit 0
