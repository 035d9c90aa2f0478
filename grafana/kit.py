"""The panel kit every ragdrift dashboard is built with (grafana-foundation-sdk builders).

Every panel and query reads the templated Prometheus datasource `${datasource}`;
panel ids and query refIds are assigned in layout order; a panel that draws an alert
threshold takes it from `grafana/thresholds.py` (the rules file) and says in
its description which alert it is and what the alert waits for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.builders import bargauge, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from grafana.thresholds import KNOBS, Rules, Threshold

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
APP = 'app=~"$app"'  # the `app` variable: multi-value, All = .*
TAGS = ["ragdrift"]
GOOD, BAD, NEUTRAL = "green", "red", "blue"


@dataclass(frozen=True)
class Q:
    """One PromQL query of a panel."""

    expr: str
    legend: str = ""
    exemplar: bool = False  # the family carries trace exemplars (agent/core/snapshot.py EXEMPLAR_FAMILIES)
    instant: bool = False
    table: bool = False


def _fmt(value: float, unit: str) -> str:
    if unit == "percentunit":
        return f"{value * 100:g} %"
    if unit == "s" and value >= 86400 and value % 86400 == 0:
        return f"{value / 86400:g} days"
    if unit == "s":
        return f"{value:g} s"
    return f"{value:g}"


class Board:
    """One dashboard being built: rows of panels."""

    def __init__(self, rules: Rules, uid: str, title: str, description: str, variables: Sequence[db.QueryVariable] = ()):
        self.rules = rules
        self.builder = (
            db.Dashboard(title).uid(uid).description(description).tags(TAGS)
            .editable().refresh("30s").time("now-3h", "now").timezone("utc")
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .link(db.DashboardLink("ragdrift").type(dm.DashboardLinkType.DASHBOARDS).tags(TAGS)
                  .as_dropdown(True).include_vars(True).keep_time(True))
            .with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
            .with_variable(query_variable("app", "App", "label_values(ragdrift_retrievals_total, app)",
                                          "RAG applications (the app label of ragdrift_retrievals_total)."))
        )
        for variable in variables:
            self.builder.with_variable(variable)

    def row(self, title: str, *panels) -> Board:
        self.builder.with_row(db.Row(title))
        for panel in panels:
            self.builder.with_panel(panel)
        return self

    def build(self) -> dm.Dashboard:
        """The dashboard, its panels (rows included) numbered from 1 in layout order."""
        dashboard = self.builder.build()
        for number, panel in enumerate(dashboard.panels or (), start=1):
            panel.id_val = number
        return dashboard

    # -- panels ------------------------------------------------------------

    def _common(self, panel, title: str, description: str, unit: str, queries: list[Q],
                threshold: str | None, width: int, height: int):
        panel.title(title).datasource(DATASOURCE).unit(unit).span(width).height(height)
        for i, q in enumerate(queries):
            target = (prometheus.Dataquery().ref_id(chr(ord("A") + i)).datasource(DATASOURCE).expr(q.expr)
                      .legend_format(q.legend or "__auto"))
            if q.exemplar:
                target.exemplar(True)
            if q.table:
                target.format(pm.PromQueryFormat.TABLE)
            if q.instant or q.table:
                target.instant()
            else:
                target.range()
            panel.with_target(target)
        if threshold is not None:
            t = self.rules[threshold]
            panel.thresholds(_steps(t.value, base=GOOD))
            description += " " + threshold_note(self.rules, t, unit)
        else:
            panel.thresholds(_steps(None))
        panel.description(description)
        return panel

    def timeseries(self, title: str, description: str, unit: str, queries: list[Q], *, threshold: str | None = None,
                   stack: bool = False, bars: bool = False, width: int = 12, height: int = 8,
                   min_val: float | None = 0, max_val: float | None = None, interval: str | None = None):
        panel = timeseries.Panel()
        self._common(panel, title, description, unit, queries, threshold, width, height)
        panel.legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
                     .placement(cm.LegendPlacement.BOTTOM).calcs([]))
        panel.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
        panel.fill_opacity(60 if stack else 10).line_width(1).show_points(cm.VisibilityMode.NEVER)
        if bars:
            panel.draw_style(cm.GraphDrawStyle.BARS)
        if stack:
            panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
        if threshold is not None:
            panel.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
        if min_val is not None:
            panel.min(min_val)
        if max_val is not None:
            panel.max(max_val)
        if interval is not None:
            panel.interval(interval)
        return panel

    def stat(self, title: str, description: str, unit: str, queries: list[Q], *, threshold: str | None = None,
             zero_is_good: bool = False, width: int = 6, height: int = 4, no_value: str | None = None,
             graph: bool = True, decimals: int | None = None):
        """A single value. `zero_is_good`: exactly 0 is green and anything else red (alerts on any increase)."""
        panel = stat.Panel()
        self._common(panel, title, description, unit, queries, threshold, width, height)
        panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False).fields(""))
        panel.graph_mode(cm.BigValueGraphMode.AREA if graph else cm.BigValueGraphMode.NONE)
        panel.color_mode(cm.BigValueColorMode.BACKGROUND if (threshold or zero_is_good) else cm.BigValueColorMode.VALUE)
        panel.text_mode(cm.BigValueTextMode.VALUE_AND_NAME if len(queries) > 1 else cm.BigValueTextMode.AUTO)
        if zero_is_good:
            panel.thresholds(_steps(None, base=BAD))  # replaces the neutral steps set above
            panel.mappings([dm.ValueMap({"0": dm.ValueMappingResult(text="0", color=GOOD, index=0)})])
        if no_value is not None:
            panel.no_value(no_value)
        if decimals is not None:
            panel.decimals(decimals)
        return panel

    def bars(self, title: str, description: str, unit: str, queries: list[Q], *, width: int = 12, height: int = 8):
        """Horizontal bars, one per series, current values."""
        panel = bargauge.Panel()
        self._common(panel, title, description, unit, queries, None, width, height)
        panel.orientation(cm.VizOrientation.HORIZONTAL).display_mode(cm.BarGaugeDisplayMode.BASIC)
        panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False).fields(""))
        panel.min(0)
        return panel

    def table(self, title: str, description: str, queries: list[Q], *, columns: Sequence[str] = (), unit: str = "none",
              width: int = 12, height: int = 6):
        """The queries' labels as rows. Without `columns` the values are hidden (a status table);
        with them, the queries are merged on their labels and query i's value is column i."""
        panel = table.Panel()
        self._common(panel, title, description, unit, queries, None, width, height)
        panel.align(cm.FieldTextAlignment.AUTO).inspect(False).show_header(True)
        if columns:
            panel.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
        rename = {f"Value #{chr(ord('A') + i)}": name for i, name in enumerate(columns)}
        panel.with_transformation(dm.DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True, **({} if columns else {"Value": True})}, "indexByName": {},
            "renameByName": rename}))
        return panel


def threshold_note(rules: Rules, t: Threshold, unit: str) -> str:
    """The sentence a threshold panel's description ends with: which alert, what number, how long."""
    knob = KNOBS[t.knob]
    wait = "at once" if t.for_ in ("0m", "0s") else f"once it stays above for {t.for_}"
    guard = ""
    if knob.guard:
        g = rules[knob.guard]
        guard = f" with at least {g.value:g} {KNOBS[g.knob].what}"
    return (f"Red: alert {t.alert}'s threshold, {_fmt(t.value, unit)} ({knob.what}); it fires {wait}{guard}. "
            f"Read from rules/ragdrift.rules.yaml.")


def _steps(value: float | None, base: str = NEUTRAL) -> db.ThresholdsConfig:
    """`base` below `value` (or everywhere), red from `value` on."""
    steps = [dm.Threshold(value=None, color=base)]
    if value is not None:
        steps.append(dm.Threshold(value=value, color=BAD))
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


def query_variable(name: str, label: str, query: str, description: str, *, multi: bool = True) -> db.QueryVariable:
    """A variable over label values of the templated datasource; multi-value ones have All = `.*`."""
    variable = (db.QueryVariable(name).label(label).description(description).datasource(DATASOURCE).query(query)
                .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC))
    if multi:
        variable.multi(True).include_all(True).all_value(".*")
    return variable
