"""What the operating system gives: regular files written atomically, read safely; process identity and groups."""
