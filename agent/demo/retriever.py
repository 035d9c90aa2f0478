"""The demo's app: a made-up helpdesk assistant and its retriever, as a team would write one.

Three tenants share one deployment. Each keeps its own HR policies, IT
handbook and support tickets behind access groups; product docs and release
notes are open to all. Documents come in versions: the current one and the
one it superseded, an expired calendar, a draft not yet in force.
`Helpdesk.retrieve` ranks what the asking user may see (the tenant, ACL and
lifecycle filters) by the terms it shares with the query, and returns
`Result`s with scores, which the demo hands to the producer library as the
app would.

Three faults break it as production does: `leak`, an index migration that
dropped the tenant and ACL fields, so both filters let everything through;
`stale`, a reindex that brought back superseded, expired and draft versions
past the lifecycle filter; `score-drift`, a canary on a smaller embedding
model, whose scores sit lower and closer together.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from ragdrift_producer import Filter, Pipeline, Result, Stages, User

PIPELINE = Pipeline(version="helpdesk-2026.01", retriever="dense-hnsw", embedding_model="e5-large-v2")
CANARY = Pipeline(version="helpdesk-2026.02-canary", retriever="dense-hnsw", embedding_model="e5-small-v2")
DEPTH = 8  # results returned per retrieval; the producer's cutoff_k of them reach the model

TENANTS = {"acme": ("Acme", 0.5), "globex": ("Globex", 0.3), "initech": ("Initech", 0.2)}
PERSONAS = {  # role -> (groups, share of the users asking)
    "staff": (("employees",), 0.4),
    "engineer": (("employees", "engineering"), 0.2),
    "support-agent": (("employees", "support"), 0.2),
    "manager": (("employees", "managers"), 0.1),
    "hr-partner": (("employees", "hr", "managers"), 0.05),
    "contractor": (("contractors",), 0.05),
}
SOURCES = {  # source -> (kept per tenant, authority)
    "hr-policies": (True, "official"),
    "it-handbook": (True, "official"),
    "support-tickets": (True, "user-generated"),
    "product-docs": (False, "official"),
    "release-notes": (False, "official"),
}


class Doc(NamedTuple):
    source: str
    slug: str
    groups: tuple[str, ...]  # who may read it, within its tenant (empty: anyone)
    parts: tuple[str, ...]  # one chunk each; "{tenant}" is the tenant's name
    before: tuple[str, str] | None = None  # (now, then): the superseded version said `then`
    life: str = "current"  # or "expired" (a month ago), or "draft" (in force next month)


DOCS = (
    Doc("hr-policies", "parental-leave", ("employees",), (
        "{tenant} employees get 16 weeks of paid parental leave, for every parent, after a birth or an adoption.",
        "Parental leave can start up to four weeks before the due date; tell your manager and HR eight weeks ahead.",
    ), before=("16 weeks", "12 weeks")),
    Doc("hr-policies", "expense-policy", ("employees",), (
        "Meals on business trips are reimbursed up to 50 EUR a day at {tenant}, with receipts.",
        "Submit expense reports within 30 days in the finance portal; your manager approves them.",
    ), before=("50 EUR", "40 EUR")),
    Doc("hr-policies", "remote-work", ("employees",), (
        "{tenant} staff may work remotely up to three days a week; agree the days with your team.",
        "Home office equipment is reimbursed once, up to 300 EUR, through an expense report.",
    )),
    Doc("hr-policies", "performance-reviews", ("managers",), (
        "Managers write performance reviews in November; calibration meetings follow in December.",
        "Ratings and promotion proposals stay confidential until calibration ends.",
    )),
    Doc("hr-policies", "salary-bands", ("hr",), (
        "{tenant} salary bands for 2026 rise by 3 percent; band L4 runs from 62,000 to 78,000 EUR.",
        "Offers above the band midpoint need the approval of the HR director.",
    )),
    Doc("hr-policies", "holiday-calendar-2025", ("employees",), (
        "Holiday calendar 2025: {tenant} offices close from December 24 to January 1.",
    ), life="expired"),
    Doc("hr-policies", "holiday-calendar-2026", ("employees",), (
        "Holiday calendar 2026: {tenant} offices close from December 24 to January 2, and on May 1.",
    )),
    Doc("hr-policies", "travel-policy", ("employees",), (
        "From next quarter, book all business travel through the travel portal; economy class for flights "
        "under six hours.",
    ), life="draft"),
    Doc("it-handbook", "vpn-setup", ("employees",), (
        "Install the VPN client from the {tenant} software portal and sign in with single sign-on.",
        "On Linux the VPN client needs the network manager plugin; restart after installing it.",
    )),
    Doc("it-handbook", "password-reset", ("employees",), (
        "Reset your password on the self-service page; a new password needs 14 characters.",
        "After five failed sign-ins the account locks for 15 minutes; the service desk can unlock it.",
    ), before=("14 characters", "10 characters")),
    Doc("it-handbook", "laptop-refresh", ("employees",), (
        "Laptops are replaced every three years; order the new one from the {tenant} IT catalogue.",
    )),
    Doc("it-handbook", "production-access", ("engineering",), (
        "Production access is granted for 8 hours through the access portal, with a ticket number.",
        "Every production session is recorded and reviewed weekly by the {tenant} security team.",
    )),
    Doc("it-handbook", "incident-runbook", ("engineering",), (
        "During an incident the on-call engineer opens a channel and pages the incident commander.",
    )),
    Doc("support-tickets", "sso-login-errors", ("support",), (
        "Customer reports SSO login errors after rotating the identity provider certificate; fixed by "
        "uploading the new certificate.",
    )),
    Doc("support-tickets", "export-timeouts", ("support",), (
        "Large CSV exports time out after 60 seconds; workaround: export one month at a time.",
    )),
    Doc("support-tickets", "duplicate-invoice", ("support",), (
        "Customer was charged twice for one invoice; the billing team issued a refund within five days.",
    )),
    Doc("product-docs", "api-keys", (), (
        "Rotate API keys in the admin console; an old key keeps working for 24 hours after rotation.",
    ), before=("24 hours", "7 days")),
    Doc("product-docs", "rate-limits", (), (
        "The API allows 600 requests per minute per key; requests above the rate limit get HTTP 429.",
    ), before=("600 requests", "300 requests")),
    Doc("product-docs", "webhooks", (), (
        "Webhooks retry failed deliveries five times with exponential backoff, then disable the endpoint.",
    )),
    Doc("product-docs", "sso-setup", (), (
        "Single sign-on supports SAML and OpenID Connect; upload the identity provider certificate in the "
        "admin console.",
    )),
    Doc("product-docs", "data-retention", (), (
        "Deleted records are kept for 30 days, then purged; backups are purged after 90 days.",
    )),
    Doc("release-notes", "release-4-1", (), (
        "Release 4.1 added scheduled CSV exports and webhook signing.",
    )),
    Doc("release-notes", "release-4-2", (), (
        "Release 4.2 raised the API rate limit to 600 requests per minute and added SCIM provisioning.",
    )),
)

QUERIES = (  # (text, query type), most asked first
    ("how many weeks of parental leave do I get", "lexical"),
    ("reset my password", "lexical"),
    ("vpn client on linux", "lexical"),
    ("time off after the birth of my child", "paraphrase"),
    ("meal allowance on business trips", "paraphrase"),
    ("api rate limit per minute", "lexical"),
    ("how do I rotate an api key", "lexical"),
    ("when are offices closed in december", "temporal"),
    ("can I work from home", "paraphrase"),
    ("account locked after failed sign-ins", "lexical"),
    ("and how early can it start", "follow_up"),
    ("deadline for expense reports", "temporal"),
    ("home office equipment reimbursed", "lexical"),
    ("SSO login errors after certificate rotation", "lexical"),
    ("csv export times out", "paraphrase"),
    ("what changed in release 4.2", "lexical"),
    ("how long are deleted records kept", "temporal"),
    ("webhook retries", "lexical"),
    ("set up single sign-on with SAML", "lexical"),
    ("new laptop", "paraphrase"),
    ("how do I get production access", "lexical"),
    ("salary band for L4", "numeric"),
    ("when are performance reviews written", "temporal"),
    ("what if the customer was charged twice", "paraphrase"),
    ("who do I page during an incident", "paraphrase"),
    ("business travel booking rules", "paraphrase"),
    ("what about the old keys", "follow_up"),
    ("gym membership discount", "no_answer"),
    ("book a parking space", "no_answer"),
    ("cafeteria menu this week", "no_answer"),
)

_STOP = frozenset(("a", "about", "an", "and", "are", "at", "be", "by", "can", "do", "for", "from", "get", "how", "i",
                   "in", "is", "it", "my", "of", "on", "or", "the", "to", "what", "when", "who", "with"))
_WORD = re.compile(r"[a-z0-9]+")


def terms(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower())) - _STOP


@dataclass(frozen=True, kw_only=True)
class Chunk:
    id: str
    parent: str
    source: str
    text: str
    terms: frozenset[str]
    tenant: str | None
    acl: tuple[str, ...]
    status: str
    effective: datetime
    expires: datetime | None
    authority: str

    def fresh(self, now: datetime) -> bool:
        return self.status == "current" and self.effective <= now and (self.expires is None or now < self.expires)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrieval:
    results: list[Result]
    stages: Stages
    filters: list[Filter]
    pipeline: Pipeline
    latency_ms: float


class Helpdesk:
    """The corpus, the users and the retriever, built once per run relative to `now`."""

    def __init__(self, now: datetime) -> None:
        self.chunks = [chunk for doc in DOCS for tenant in _owners(doc) for chunk in _chunks(doc, tenant, now)]
        self.users = [(User(tenant=t, groups=[f"{t}/{g}" for g in groups]), weight * share)
                      for t, (_, weight) in TENANTS.items() for groups, share in PERSONAS.values()]
        self._query_weights = [1 / (n + 1) ** 0.8 for n in range(len(QUERIES))]

    def ask(self, rng: random.Random) -> tuple[str, str, User]:
        """A query text, its type, and who asks it."""
        (text, query_type), = rng.choices(QUERIES, self._query_weights)
        (user, _), = rng.choices(self.users, [w for _, w in self.users])
        return text, query_type, user

    def retrieve(self, query: str, user: User, rng: random.Random, faults: frozenset[str] = frozenset(),
                 now: datetime | None = None) -> Retrieval:
        now = now or datetime.now(UTC)
        wanted = terms(query)
        scored = []
        for chunk in self.chunks:
            shared = len(wanted & chunk.terms)
            if shared:
                score = 0.35 + 0.55 * shared / len(wanted) + rng.gauss(0, 0.03)
                scored.append((min(max(score, 0.0), 1.0), chunk))
        groups = set(user.groups)
        removed = {"tenant": 0, "acl": 0, "status": 0}
        kept = []
        for score, chunk in scored:
            if "leak" not in faults and chunk.tenant not in (None, user.tenant):
                removed["tenant"] += 1
            elif "leak" not in faults and chunk.acl and groups.isdisjoint(chunk.acl):
                removed["acl"] += 1
            elif "stale" not in faults and not chunk.fresh(now):
                removed["status"] += 1
            else:
                kept.append((score, chunk))
        kept.sort(key=lambda pair: pair[0], reverse=True)
        pipeline = PIPELINE
        if "score-drift" in faults:
            pipeline = CANARY
            kept = [(0.45 * score + 0.15, chunk) for score, chunk in kept]
        results = [Result(chunk_id=c.id, parent_id=c.parent, source=c.source, score=round(score, 4),
                          effective_date=c.effective, expires_at=c.expires, status=c.status, authority=c.authority,
                          acl=c.acl, tenant=c.tenant, text=c.text)
                   for score, c in kept[:DEPTH]]
        stages = Stages(candidates=len(scored), after_filter=len(kept))
        filters = [Filter(name=name, removed=n) for name, n in removed.items()]
        latency = 35.0 + 0.5 * len(scored) + rng.expovariate(1 / 40)
        return Retrieval(results=results, stages=stages, filters=filters, pipeline=pipeline, latency_ms=round(latency, 1))


def _owners(doc: Doc) -> tuple[str | None, ...]:
    return tuple(TENANTS) if SOURCES[doc.source][0] else (None,)


def _chunks(doc: Doc, tenant: str | None, now: datetime) -> list[Chunk]:
    """The chunks of every version of `doc` kept for `tenant` (None: shared by all)."""
    parent = f"{doc.source}/{tenant}/{doc.slug}" if tenant else f"{doc.source}/{doc.slug}"
    name = TENANTS[tenant][0] if tenant else ""
    acl = tuple(f"{tenant}/{g}" for g in doc.groups) if tenant else ()
    current = {"current": ("current", now - timedelta(days=90), None),
               "expired": ("current", now - timedelta(days=400), now - timedelta(days=30)),
               "draft": ("draft", now + timedelta(days=30), None)}[doc.life]
    versions = [(2 if doc.before else 1, doc.parts, *current)]
    if doc.before:
        was, then = doc.before
        versions.append((1, tuple(p.replace(was, then) for p in doc.parts), "superseded",
                         now - timedelta(days=500), None))
    authority = SOURCES[doc.source][1]
    return [Chunk(id=f"{parent}#v{version}.c{n}", parent=parent, source=doc.source, text=text, terms=terms(text), tenant=tenant, acl=acl,
                  status=status,
                  effective=effective, expires=expires, authority=authority)
            for version, parts, status, effective, expires in versions
            for n, text in enumerate(part.format(tenant=name) for part in parts)]
