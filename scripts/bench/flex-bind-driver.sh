#!/bin/sh
# A small third-party FlexVolume driver for the exec backend's benchmark (scripts/bench/csi-exec.mjs):
# not attachable; mount binds a directory beside it onto the pod's target (after checking, as
# kubelet's drivers do, that the target is not already mounted); unmount takes it away. Its init says
# supportsMetrics, so the lifecycle's NodeGetVolumeStats is answered, as kubelet statfs's such a volume.
here=${0%/*}
ok() { printf '{"status":"Success"%s}\n' "${1:+,$1}"; exit 0; }
fail() { printf '{"status":"Failure","message":"%s"}\n' "$1"; exit 1; }
case "$1" in
init) ok '"capabilities":{"attach":false,"supportsMetrics":true}' ;;
mount)
  mountpoint -q "$2" && ok
  mkdir -p "$here/data" "$2" && mount --bind "$here/data" "$2" || fail "bind of $2 failed"
  ok ;;
unmount)
  if mountpoint -q "$2"; then umount "$2" || fail "umount of $2 failed"; fi
  ok ;;
*) printf '{"status":"Not supported"}\n'; exit 1 ;;
esac
