from pr1lib.cli.main import main

raise SystemExit(main())
