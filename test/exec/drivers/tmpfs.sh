#!/bin/bash
# A non-attachable FlexVolume driver: mount puts a tmpfs on the pod's directory, unmount takes it
# away. Installed under several names, each a quirk seen in real drivers:
#   tmpfs   well behaved (checks before it mounts)
#   noise   Python-style warnings and the argv on stderr, a traceback after the JSON
#   exit1   answers Success with exit code 1
#   stack   mounts again on a repeated mount (never checks)
#   hang    hangs in mount, with a child, past any deadline
#   daemon  leaves a daemon holding its stdout after answering
#   nofsgroup  well behaved, but its init says fsGroup: false (kubelet then leaves ownership alone)
#   halfway mounts, then answers Failure (a check after the mount that failed)
#   verbose fails mount with a message of 1 MiB (a whole log dumped into it)
#   mountns answers Not supported to mount, though it is not attachable (no device mount to bind)
#   metrics well behaved, and its init says supportsMetrics: true (kubelet then statfs's the volume)
# Pids of anything left running go to pids.log; argv to calls.log (see loop.sh).
set -u
here=$(dirname "$0")
name=$(basename "$0")
{ printf '%s' "$name"; for a in "$@"; do printf '\x1f%s' "$a"; done; printf '\x1e'; } >>"$here/calls.log"
# Who started the driver (nsenter under --flex-exec host).
cat "/proc/$PPID/comm" >>"$here/parents.log" 2>/dev/null
ok() { printf '{"status":"Success"%s}\n' "${1:+,$1}"; exit 0; }
fail() { printf '{"status":"Failure","message":%s}\n' "$(jq -Rn --arg m "$1" '$m')"; exit 1; }

case "${1:-}" in
init)
  [ "$name" = nofsgroup ] && ok '"capabilities":{"attach":false,"requiresFSResize":false,"fsGroup":false}'
  [ "$name" = metrics ] && ok '"capabilities":{"attach":false,"requiresFSResize":false,"supportsMetrics":true}'
  ok '"capabilities":{"attach":false,"requiresFSResize":false}' ;;
mount)
  target=$2
  case "$name" in
  mountns) printf '{"status":"Not supported"}\n'; exit 1 ;;
  verbose)
    printf '{"status":"Failure","message":"mount refused: '
    head -c 1048576 /dev/zero | tr '\0' 'x'
    printf ' (end of the log)"}\n'
    exit 1 ;;
  hang)
    sleep 300 & echo $! >>"$here/pids.log"
    echo $$ >>"$here/pids.log"
    wait ;;
  noise)
    echo "/usr/lib/python3/dist-packages/requests/__init__.py:89: RequestsDependencyWarning: urllib3 (1.26) doesn't match a supported version!" >&2
    echo "debug: called with $*" >&2 ;;
  esac
  if [ "$name" != stack ] && mountpoint -q "$target"; then ok; fi
  mkdir -p "$target"
  mount -t tmpfs -o size=8m tmpfs "$target" || fail "mount failed"
  case "$name" in
  noise)
    printf '{"status":"Success"}\n'
    printf 'Traceback (most recent call last):\n  File "/opt/driver.py", line 12, in <module>\n    cleanup({"tmp": 1})\nOSError: [Errno 2] No such file\n' >&2
    exit 0 ;;
  exit1) printf '{"status":"Success"}\n'; exit 1 ;;
  halfway) fail "quota check failed after mount" ;;
  daemon)
    sleep 300 & echo $! >>"$here/pids.log"
    ok ;;
  esac
  ok ;;
unmount)
  umount "$2" 2>/dev/null || fail "umount $2 failed"
  ok ;;
*) printf '{"status":"Not supported"}\n'; exit 1 ;;
esac
