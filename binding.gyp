{
  "targets": [
    {
      "target_name": "twinvol_mount",
      "sources": ["native/mount.c", "native/loop.c", "native/args.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror"]
    }
  ]
}
