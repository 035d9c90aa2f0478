"""ragdrift's Grafana dashboards as code (not part of the `agent` package).

`python grafana/build.py` writes grafana/dashboards/*.json; see README.md,
"Dashboards".
"""
