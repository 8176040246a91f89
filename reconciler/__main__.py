from reconciler.cli import main

raise SystemExit(main())
