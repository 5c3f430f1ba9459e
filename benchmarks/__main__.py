"""``python -m benchmarks`` (run from the repository root); see benchmarks/README.md."""

from benchmarks._cli import main

raise SystemExit(main())
