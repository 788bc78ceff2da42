from deltakeeper.cli import main

raise SystemExit(main())
