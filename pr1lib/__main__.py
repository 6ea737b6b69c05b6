from pr1lib.cli import main

raise SystemExit(main())
