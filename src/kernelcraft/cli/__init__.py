"""The `kernelcraft` command (typer): parse, call, print. Logic lives in the packages."""

from . import bench as _bench  # noqa: F401  (adds the `bench` command)
from . import config as _config  # noqa: F401  (adds the `config` commands)
from . import gc as _gc  # noqa: F401  (adds the `gc` command)
from . import imports as _imports  # noqa: F401  (adds the `import-kernels` command)
from . import optimize as _optimize  # noqa: F401  (adds the `optimize` command)
from . import pack as _pack  # noqa: F401  (adds the `pack` commands)
from . import profile as _profile  # noqa: F401  (adds the `profile` command)
from . import runs as _runs  # noqa: F401  (adds the `runs` commands)
from . import skills as _skills  # noqa: F401  (adds the `skills` commands)
from . import verdicts as _verdicts  # noqa: F401  (adds the `verdicts` commands)
from . import selfcheck as _selfcheck  # noqa: F401  (adds the `self-check` command)
from . import serve as _serve  # noqa: F401  (adds the `serve-judge` command)
from .app import app, main
from .train import app as train_app

app.add_typer(train_app, name="train")

__all__ = ["app", "main"]
