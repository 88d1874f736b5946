"""``python -m sadl`` runs the command line."""

from sadl.cli import main

raise SystemExit(main())
