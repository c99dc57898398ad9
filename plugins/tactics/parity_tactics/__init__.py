"""parity-tactics: TensorRT tactic replay files, their inspection and diffing, and ``debug build``.

Python API (mirrors the CLI; none of it needs TensorRT except the recorder/replayer at build time)::

    from parity_tactics import load_replay, diff_tactics, render_replay, render_diff

    print(render_replay(load_replay("replay.json")))          # parity inspect tactics replay.json
    result = diff_tactics(dir="replays")                        # parity inspect diff-tactics --dir replays
    print(render_diff(result))

    from parity_tactics import TacticRecorder, TacticReplayer  # --save-tactics / --load-tactics build hooks
"""

from __future__ import annotations

from parity.api import lazy_attributes

_LAZY = {
    "TacticReplay": "parity_tactics.replay",
    "Tactic": "parity_tactics.replay",
    "TensorFormat": "parity_tactics.replay",
    "load_replay": "parity_tactics.replay",
    "save_replay": "parity_tactics.replay",
    "load_replays": "parity_tactics.replay",
    "diff_replays": "parity_tactics.diff",
    "diff_tactics": "parity_tactics.diff",
    "DiffResult": "parity_tactics.diff",
    "Suspect": "parity_tactics.diff",
    "render_replay": "parity_tactics.render",
    "render_diff": "parity_tactics.render",
    "TacticRecorder": "parity_tactics.trt_tactics",
    "TacticReplayer": "parity_tactics.trt_tactics",
    "build_hooks": "parity_tactics.trt_tactics",
    "tactic_options": "parity_tactics.options",
}

__all__ = list(_LAZY)

__getattr__ = lazy_attributes(__name__, _LAZY)
