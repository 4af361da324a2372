"""The frontend's graph helpers: ``graph`` (context manager), ``jit`` (decorator that builds)
and ``graph_cache`` (memoising decorator keyed by a user function)."""

from __future__ import annotations

from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Iterator, List, Tuple

from ._dnngraph import data_type, heur_mode

__all__ = ["graph", "jit", "graph_cache"]


def graph_cache(key_fn: Callable[..., Any], maxsize: int = 256) -> Callable:
    """Memoises the decorated function by key_fn(*args, **kwargs); the oldest entry goes when
    maxsize entries are held."""

    def decorator(func: Callable) -> Callable:
        cache: dict = {}

        @wraps(func)
        def cached(*args: Any, **kwargs: Any) -> Any:
            key = key_fn(*args, **kwargs)
            if key in cache:
                return cache[key]
            value = func(*args, **kwargs)
            if len(cache) >= maxsize:
                cache.pop(next(iter(cache)))
            cache[key] = value
            return value

        cached.cache = cache  # type: ignore[attr-defined]
        return cached

    return decorator


def jit(heur_modes: Any = heur_mode.A, **kwargs: Any) -> Callable:
    """Decorates a function returning (graph, [tensors]): builds the graph with heur_modes when it
    has no plan yet and returns (graph, [uids of the tensors])."""
    modes = list(heur_modes) if isinstance(heur_modes, (list, tuple)) else [heur_modes]

    def decorator(func: Callable) -> Callable:
        @wraps(func)
        def built(*args: Any, **kw: Any) -> Tuple[Any, List[int]]:
            g, tensors = func(*args, **kw)
            if g.get_execution_plan_count() <= 0:
                g.build(modes)
            return g, [t.get_uid() for t in tensors]

        return built

    return decorator


@contextmanager
def graph(handle: Any, name: str = "cudnn_graph", io_data_type: Any = data_type.HALF,
          intermediate_data_type: Any = data_type.FLOAT,
          compute_data_type: Any = data_type.FLOAT, **graph_kwargs: Any) -> Iterator[Any]:
    """Yields (pygraph, []) made with these settings; graph_kwargs go to pygraph."""
    from ._compat import pygraph

    yield pygraph(handle=handle, name=name, io_data_type=io_data_type,
                  intermediate_data_type=intermediate_data_type,
                  compute_data_type=compute_data_type, **graph_kwargs), []
