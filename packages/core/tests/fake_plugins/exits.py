"""A plugin that ends the program while it is imported (sys.exit in module code)."""

raise SystemExit("fake plugin 'exits' gave up at import")
