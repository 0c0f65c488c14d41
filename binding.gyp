{
  "targets": [
    {
      "target_name": "twinvol_mount",
      "sources": ["native/mount.c", "native/loop.c", "native/args.c", "native/spawn.c", "native/bind.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror"]
    }
  ]
}
