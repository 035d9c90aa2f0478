"""Synthetic `retrieval.v1` traffic, reproducible from a seed, so every metric, alert and dashboard has input.

The modules, in the order an event is made:

- `deployment`: the deployment the traffic stands for (tenants, groups, sources, apps, query slices).
- `corpus`: the documents and chunks, with current and superseded versions, built once.
- `traffic`: `generate` and the stream's state; `draw`: the clean event from the traffic stream.
- `incidents`: incident kinds, `parse_incident`, and how each incident edits an event.
- `render`: an event as `retrieval.v1` JSON, and the invalid messages that stand in for some.
"""

# The corpus, the query population and the hashed identities do not depend on the
# seed: they stand for one deployment with its own HMAC salt, so a baseline frozen
# from one seed does not see another seed's traffic as new. The seed picks events.
#
# Three random streams keep the parts apart: traffic, incidents, invalid lines.
# Incidents and invalid lines never draw from the traffic stream, so outside an
# incident window the output is byte-identical to the clean stream, and an invalid
# line stands where its clean event would have been.

from agent.synth.incidents import INCIDENT_KINDS, INCIDENT_MINUTES, INCIDENT_SHARE, ScheduledIncident, parse_incident
from agent.synth.render import INVALID_KINDS
from agent.synth.traffic import DEFAULT_START, generate

__all__ = [
    "DEFAULT_START",
    "INCIDENT_KINDS",
    "INCIDENT_MINUTES",
    "INCIDENT_SHARE",
    "INVALID_KINDS",
    "ScheduledIncident",
    "generate",
    "parse_incident",
]
