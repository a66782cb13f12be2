"""``python -m recorder``: Sluicegate's run recorder."""

from recorder.serving import main

raise SystemExit(main())
