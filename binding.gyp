{
  "targets": [
    {
      "target_name": "twinvol_mount",
      "sources": ["native/mount.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror"]
    }
  ]
}
