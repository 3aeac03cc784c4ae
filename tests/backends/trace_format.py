"""The Trace Event Format's rules for the traces hlo writes (``Profile.export_trace``): the
tests of the CPU and CUDA timelines check their JSON with ``check_trace_event_format``."""


def check_trace_event_format(trace: dict) -> list:
    """The Trace Event Format's rules for what we write (JSON object form): returns the
    complete events. Complete events on one track must nest (Perfetto's rule for 'X')."""
    assert set(trace) >= {"traceEvents"} and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit") in (None, "ms", "ns")
    spans = []
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"] and e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index"), e
            assert isinstance(e["args"], dict) and e["args"], e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        assert isinstance(e.get("cat", ""), str) and isinstance(e.get("args", {}), dict), e
        spans.append(e)
    tracks = {}
    for e in spans:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    named = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert set(tracks) <= named
    eps = 1e-6
    for evs in tracks.values():  # nesting: sorted by start, longest first, a stack of ends
        stack = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"] + eps:
                stack.pop()
            end = e["ts"] + e["dur"]
            assert not stack or end <= stack[-1] + eps, f"{e} overlaps its parent without nesting"
            stack.append(end)
    return spans
