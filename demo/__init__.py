"""``make demo``: the seed story of Sluicegate, played on a local control plane.

- ``story``    the cast and what each of them submits, when (pure data)
- ``board``    what the live view shows, computed from pods and Queues (pure)
- ``summary``  the figures at the end, from the auditor's record (pure)
- ``following`` a watch of the managed pods for the view, through the auditor's connection
- ``showing``  the live view (rich) and the plain lines for CI and logs
- ``playing``  sets the scene and plays the story against the cluster with the real kubectl
"""
