"""The chaos run's timeline (tests/chaos): transfers and their outcomes against the faults.

  python3 tests/chaos/plot.py HISTORY [PNG]

Top: transfers ended each second, stacked by outcome (landed, failed with a reason,
outcome unknown to the caller). Middle: every failed transfer as a mark at its end, one
row per status. Bottom: each fault as a bar on the row of each node it touched, coloured
by kind, from its start to its heal. Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"kill9": "#d62728", "stop": "#ff7f0e", "rank_kill": "#8c564b", "partition": "#1f77b4",
           "partition_oneway": "#17becf", "link_down": "#000000", "loss": "#9467bd",
           "slow": "#bcbd22", "key_rotate": "#2ca02c", "cert_rotate": "#98df8a",
           "squeeze": "#e377c2", "oom": "#7f7f7f"}


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            recs.append(json.loads(line))
    return recs


def timeline(history, png):
    recs = load(history)
    t0 = next((r["t"] for r in recs if r["kind"] == "start"), recs[0]["t"])
    # Every node a row, also those no fault touched.
    count = next((r["nodes"] for r in recs if r["kind"] == "start"), 0)
    nodes = sorted({f"n{i}" for i in range(count)} |
                   {n for r in recs if r["kind"] == "fault" for n in r["nodes"]},
                   key=lambda n: int(n[1:]))
    ends = [r for r in recs if r["kind"] == "outcome"]
    span = max((r["t"] for r in recs), default=t0) - t0
    nsec = int(span) + 1
    ok, bad, unk = [0] * nsec, [0] * nsec, [0] * nsec
    fails = {}
    for r in ends:
        s = int(r["t"] - t0)
        if not 0 <= s < nsec:
            continue
        if r["status"] == "B10_OK":
            ok[s] += 1
        elif r["status"] in ("RELEASED", "ABANDONED", "CANCEL_RELEASED"):
            unk[s] += 1
        else:
            bad[s] += 1
            fails.setdefault(r["status"], []).append(r["t"] - t0)
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(14, 10), sharex=True,
                                        gridspec_kw={"height_ratios": [3, 2, 3]})
    xs = list(range(nsec))
    ax1.stackplot(xs, ok, bad, unk, labels=["landed", "failed with a reason", "outcome unknown"],
                  colors=["#2ca02c", "#d62728", "#7f7f7f"], step="post")
    ax1.set_ylabel("transfers ended / s")
    ax1.legend(loc="upper right", fontsize=8)
    total = sum(ok) + sum(bad) + sum(unk)
    viol = [r for r in recs if r["kind"] == "violation"]
    ax1.set_title(f"b10d chaos: {total} transfers, {sum(ok)} landed, {sum(bad)} failed with a reason, "
                  f"{sum(1 for r in recs if r['kind'] == 'fault')} faults, {len(viol)} violations")
    for i, (st, ts) in enumerate(sorted(fails.items(), key=lambda x: -len(x[1]))):
        ax2.plot(ts, [i] * len(ts), "|", markersize=8, label=f"{st} ({len(ts)})")
    ax2.set_yticks(range(len(fails)))
    ax2.set_yticklabels([s.replace("B10_ERR_", "") for s, _ in
                         sorted(fails.items(), key=lambda x: -len(x[1]))], fontsize=7)
    ax2.set_ylabel("failures")
    heals = {r["fault"]: r["t"] for r in recs if r["kind"] == "heal"}
    seen = set()
    for r in recs:
        if r["kind"] != "fault":
            continue
        start = r["t"] - t0
        end = heals.get(r["id"], r["t"] + max(r.get("dur", 0), 0.3)) - t0
        for n in r["nodes"]:
            y = nodes.index(n)
            lab = r["what"] if r["what"] not in seen else None
            seen.add(r["what"])
            ax3.broken_barh([(start, max(end - start, 0.3))], (y - 0.4, 0.8),
                            facecolors=COLOURS.get(r["what"], "#333333"), label=lab)
    for v in viol:
        for ax in (ax1, ax2, ax3):
            ax.axvline(v["t"] - t0, color="red", linestyle="--")
    heal_all = [r["t"] - t0 for r in recs if r["kind"] == "heal_all"]
    for h in heal_all:
        for ax in (ax1, ax2, ax3):
            ax.axvline(h, color="black", linestyle=":")
    ax3.set_yticks(range(len(nodes)))
    ax3.set_yticklabels(nodes, fontsize=7)
    ax3.set_ylabel("faults by node")
    ax3.set_xlabel("seconds (dotted: every fault healed)")
    ax3.legend(loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return png


if __name__ == "__main__":
    print(timeline(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1] + ".png"))
