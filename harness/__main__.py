from dlbench.harness.cli import main

raise SystemExit(main())
