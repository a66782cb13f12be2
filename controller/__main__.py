"""``python -m controller``: Sluicegate's gate controller, serving the scheduler extender too."""

from controller.serving import main

raise SystemExit(main())
