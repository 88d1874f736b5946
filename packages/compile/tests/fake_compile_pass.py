"""A plugin that adds a pass to sadl.compile through register_compile_passes."""

from sadl.plugins import hookimpl, require_api
from sadl_compile import CompilePassDef

require_api("1.0")


def count_calls(graph, context):
    """Note how many calls the graph has after core's simplifying passes."""
    calls = sum(1 for node in graph.nodes if node.kind == "call")
    graph.notes.append(f"count_calls: {calls} calls (fusion {context.options.fusion})")


@hookimpl
def register_compile_passes():
    return [
        CompilePassDef(
            "count_calls", count_calls, after=("dead_code_final",), before=("memory_plan",)
        )
    ]
