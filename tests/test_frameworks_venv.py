"""The frameworks venv is what its constraints pin, its children run offline, and
neither its installer nor the fixture takes a stale venv for a usable one."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import textwrap
from pathlib import Path

from tests import frameworks
from tests.frameworks import CONSTRAINTS, PRODUCER, STAMP
from tests.test_pinned_tools import canonical, fake, pins

ROOT = Path(__file__).resolve().parent.parent


def test_the_frameworks_venv_holds_what_its_constraints_pin(frameworks_python):
    done = frameworks_python.run("-m", "pip", "freeze", "--all", "--exclude-editable", check=True)
    have = {canonical(name): version for name, _, version in (line.partition("==") for line in done.stdout.split())}
    assert have == pins(CONSTRAINTS)


def test_a_retrieval_in_the_frameworks_venv_is_traced_and_reaches_no_network(frameworks_python, tmp_path):
    """One LangChain and one Haystack retrieval, each a RETRIEVER span; Haystack writes no
    telemetry id in the home directory, and an HTTP request is refused at once."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent("""
        import json, urllib.request
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from openinference.instrumentation.haystack import HaystackInstrumentor

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        LangChainInstrumentor().instrument(tracer_provider=provider)
        HaystackInstrumentor().instrument(tracer_provider=provider)

        from langchain_core.documents import Document as LcDocument
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.vectorstores import InMemoryVectorStore
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
        store.add_documents([LcDocument(page_content="alpha", id="a"), LcDocument(page_content="beta", id="b")])
        store.as_retriever(search_kwargs={"k": 1}).invoke("alpha")

        from haystack import Document, Pipeline
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.document_stores.in_memory import InMemoryDocumentStore
        docs = InMemoryDocumentStore()
        docs.write_documents([Document(id="c", content="gamma"), Document(id="d", content="delta")])
        pipeline = Pipeline()
        pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=docs, top_k=1))
        pipeline.run({"retriever": {"query": "gamma"}})

        try:
            urllib.request.urlopen("http://example.com/")
            network = "reached"
        except OSError:
            network = "refused"
        kinds = sorted(s.attributes.get("openinference.span.kind", "") for s in exporter.get_finished_spans())
        print(json.dumps({"kinds": kinds, "network": network}))
    """))
    done = frameworks_python.run(app, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"kinds": ["CHAIN", "RETRIEVER", "RETRIEVER"], "network": "refused"}
    assert not (tmp_path / ".haystack").exists()


def run_installer(venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ROOT / ".ci" / "frameworks"], env={**os.environ, "RAGDRIFT_FRAMEWORKS_VENV": str(venv)},
                          capture_output=True, text=True)


def test_a_frameworks_venv_without_the_current_constraints_is_installed_again(tmp_path):
    """A venv whose packages are at the pinned versions counts as installed only with the constraints' stamp.
    Its python answers the version query from the constraints, installs the producer (``--no-deps``) and
    refuses any other pip command: an install attempt shows as that refusal."""
    venv = tmp_path / "venv"
    fake(venv / "bin" / "python", textwrap.dedent(f"""\
        if [ "$1" = - ]; then
          cat >/dev/null; shift
          for name in "$@"; do
            grep -i -E "^$(echo "$name" | sed 's/-/[-_.]/g')==" {CONSTRAINTS} | sed "s/^[^=]*==/$name==/"
          done
          exit 0
        fi
        echo "pip $*"
        case "$*" in *--no-deps*) exit 0 ;; esac
        exit 3
    """))

    for stamp in (None, "0" * 64):  # installed before the constraints, or with other constraints
        if stamp is not None:
            (venv / STAMP).write_text(stamp + "\n")
        done = run_installer(venv)
        assert done.returncode == 3, done.stdout + done.stderr
        assert "installing the frameworks" in done.stdout
        assert f"-c {CONSTRAINTS} --upgrade pip" in done.stdout
        assert not (venv / STAMP).exists()  # a failed install leaves no stamp

    (venv / STAMP).write_text(hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest() + "\n")
    done = run_installer(venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"frameworks already in {venv}\n")
    if (PRODUCER / "pyproject.toml").is_file():  # installed again every run: its code changes under the venv
        assert f"--no-deps --no-build-isolation -e {PRODUCER}\n" in done.stdout


def test_the_fixture_takes_no_missing_or_stale_venv(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    monkeypatch.setenv("RAGDRIFT_FRAMEWORKS_VENV", str(venv))
    assert "is not installed in" in frameworks.problem()

    fake(venv / "bin" / "python", "exit 0\n")
    assert "was not installed with the current constraints/frameworks.txt" in frameworks.problem()
    (venv / STAMP).write_text("0" * 64 + "\n")
    assert "was not installed with the current constraints/frameworks.txt" in frameworks.problem()

    (venv / STAMP).write_text(hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest() + "\n")
    if (PRODUCER / "pyproject.toml").is_file():
        assert f"does not hold {PRODUCER} editable" in frameworks.problem()
        info = venv / "lib" / "python3.11" / "site-packages" / "ragdrift_producer-0.1.0.dist-info"
        info.mkdir(parents=True)
        (info / "direct_url.json").write_text(json.dumps({"url": "file:///elsewhere/producer",
                                                          "dir_info": {"editable": True}}))
        assert f"does not hold {PRODUCER} editable" in frameworks.problem()  # another checkout's
        (info / "direct_url.json").write_text(json.dumps({"url": PRODUCER.as_uri(), "dir_info": {"editable": True}}))
    assert frameworks.problem() is None
