#!/bin/bash
# A well-behaved attachable FlexVolume driver, as vendors wrote them: attach sets up a loop device
# over the image file named in the options, waitforattach checks it, mountdevice formats a blank
# device and mounts it, mount answers "Not supported" (kubelet bind-mounts from the device mount
# path), unmountdevice and detach undo. Installed under several names: "loopempty" prints nothing
# for mount (a driver that does not know the verb); "loopresize" says requiresFSResize and grows
# the image (expandvolume) and the loop device over it (expandfs); "loopbare" attaches and leaves the
# rest to kubelet: mountdevice, mount and expandfs are "Not supported" (kubelet formats a blank device,
# mounts it, binds it, and grows its filesystem), and expandvolume grows the image and the loop device
# over it (as a node sees a grown disk); "loopcrash" is killed (SIGKILL, as by the OOM killer) in detach
# and isattached before it does or prints anything. Every call's argv is logged to calls.log beside
# the driver (fields split by \x1f, calls by \x1e) so the tests see kubelet's exact argv.
set -u
here=$(dirname "$0")
name=$(basename "$0")
{ printf '%s' "$name"; for a in "$@"; do printf '\x1f%s' "$a"; done; printf '\x1e'; } >>"$here/calls.log"
mkdir -p "$here/state"
ok() { printf '{"status":"Success"%s}\n' "${1:+,$1}"; exit 0; }
fail() { printf '{"status":"Failure","message":%s}\n' "$(jq -Rn --arg m "$1" '$m')"; exit 1; }
opt() { jq -r --arg k "$1" '.[$k] // empty' <<<"$2"; }

case "${1:-}" in
init)
  [ "$name" = loopresize ] && ok '"capabilities":{"attach":true,"requiresFSResize":true}'
  [ "$name" = loopbare ] && ok '"capabilities":{"attach":true}'
  ok '"capabilities":{"attach":true,"requiresFSResize":false}' ;;
expandvolume)
  image=$(opt image "$2")
  truncate -s "$4" "$image" || fail "truncate failed"
  if [ "$name" = loopbare ]; then for dev in $(losetup -j "$image" | cut -d: -f1); do losetup -c "$dev"; done; fi
  ok ;;
expandfs)
  [ "$name" = loopbare ] && { printf '{"status":"Not supported"}\n'; exit 1; }
  # Online ext4 growth needs CAP_SYS_RESOURCE, which a test container may lack: the device grows.
  losetup -c "$3" || fail "resize of $3 failed"
  ok ;;
attach)
  image=$(opt image "$2"); pv=$(opt kubernetes.io/pvOrVolumeName "$2")
  [ -f "$image" ] || fail "no image file $image"
  dev=$(losetup -j "$image" | cut -d: -f1 | head -n1)
  [ -n "$dev" ] || dev=$(losetup -f --show "$image") || fail "losetup failed"
  printf '%s' "$image" >"$here/state/$pv"
  ok "\"device\":\"$dev\"" ;;
waitforattach)
  [ -b "$2" ] || fail "device $2 is not there"
  ok "\"device\":\"$2\"" ;;
isattached)
  [ "$name" = loopcrash ] && kill -KILL $$
  image=$(opt image "$2")
  if [ -n "$(losetup -j "$image")" ]; then ok '"attached":true'; else ok '"attached":false'; fi ;;
mountdevice)
  [ "$name" = loopbare ] && { printf '{"status":"Not supported"}\n'; exit 1; }
  path=$2 dev=$3 fstype=$(opt kubernetes.io/fsType "$4")
  mountpoint -q "$path" && ok
  blkid "$dev" >/dev/null 2>&1 || mkfs.ext4 -q "$dev" >/dev/null 2>&1 || fail "mkfs failed"
  mkdir -p "$path"
  mount -t "${fstype:-ext4}" "$dev" "$path" 2>/dev/null || fail "mount of $dev failed"
  ok ;;
unmountdevice)
  umount "$2" 2>/dev/null || fail "umount $2 failed"
  ok ;;
detach)
  [ "$name" = loopcrash ] && kill -KILL $$
  [ -f "$here/state/$2" ] || ok
  image=$(cat "$here/state/$2")
  for dev in $(losetup -j "$image" | cut -d: -f1); do losetup -d "$dev"; done
  rm -f "$here/state/$2"
  ok ;;
mount)
  [ "$name" = loopempty ] && exit 1
  printf '{"status":"Not supported"}\n'; exit 1 ;;
*) printf '{"status":"Not supported"}\n'; exit 1 ;;
esac
