from scorer.cli import main

raise SystemExit(main())
