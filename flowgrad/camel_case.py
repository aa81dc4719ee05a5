"""TF.js spellings: camelCase names resolve to flowgrad's snake_case ones.

``tf.valueAndGrads``, ``x.matMul`` and ``memory().numTensors`` find the same objects as
``tf.value_and_grads``, ``x.mat_mul`` and ``memory().num_tensors``, without doubling what
``dir()`` and autocompletion show.
"""

_SPECIAL = {"isNaN": "is_nan", "as1D": "as1d", "as2D": "as2d", "as3D": "as3d",
            "as4D": "as4d", "as5D": "as5d", "toString": "to_string"}


def camel_to_snake(name):
    """``valueAndGrads`` -> ``value_and_grads``; ``as1D`` -> ``as1d``; ``tensor2d`` unchanged.

    >>> camel_to_snake("variableGrads"), camel_to_snake("isNaN"), camel_to_snake("basicLSTMCell")
    ('variable_grads', 'is_nan', 'basic_lstm_cell')
    """
    special = _SPECIAL.get(name)
    if special is not None:
        return special
    out = []
    n = len(name)
    for i, c in enumerate(name):
        if c.isupper():
            prev = name[i - 1] if i else ""
            if i and (prev.islower() or prev.isdigit()):
                out.append("_")
            elif i and prev.isupper() and i + 1 < n and name[i + 1].islower():
                out.append("_")
            out.append(c.lower())
        else:
            out.append(c)
    return "".join(out)


class CamelAlias:
    """A TF.js spelling of an attribute (``matMul`` for ``mat_mul``): a class attribute
    that reads the snake_case one by name, so a subclass's override is what it finds.

    NOTE: why not ``__getattr__``: on CPython 3.10 and 3.11 a class with ``__getattr__``
    gets no specialised attribute reads at all (every ``t._data`` in the engine went
    through the generic lookup: 10% of the instructions of a tiny training step)."""
    __slots__ = ("snake",)

    def __init__(self, snake):
        self.snake = snake

    def __get__(self, obj, cls=None):
        return getattr(cls if obj is None else obj, self.snake)

    def __repr__(self):
        return f"<TF.js spelling of {self.snake!r}>"


_ACRONYMS = {"nd", "nan", "lstm", "fft", "rgb", "hsv", "gru", "lrn", "nms"}   # spaceToBatchND
_UNSPECIAL = {}
for _camel, _snake in _SPECIAL.items():
    _UNSPECIAL.setdefault(_snake, []).append(_camel)


def camel_spellings(snake):
    """The camelCase spellings that ``camel_to_snake`` turns into ``snake`` (each part
    capitalised, acronyms also in capitals: ``batch_to_space_nd`` -> batchToSpaceNd and
    batchToSpaceND); none for a name without an underscore (but as1D, isNaN...).

    >>> camel_spellings("mat_mul"), camel_spellings("is_nan")
    (['matMul'], ['isNan', 'isNAN', 'isNaN'])
    """
    parts = snake.split("_")
    if len(parts) < 2 or not all(parts) or snake[:1] == "_":
        return list(_UNSPECIAL.get(snake, ()))
    options = [[parts[0]]]
    for p in parts[1:]:
        opts = [p[:1].upper() + p[1:]]
        if p in _ACRONYMS:
            opts.append(p.upper())
        options.append(opts)
    out = [""]
    for opts in options:
        out = [o + p for o in out for p in opts]
    out = [c for c in out if camel_to_snake(c) == snake]
    return out + [c for c in _UNSPECIAL.get(snake, ()) if c not in out]


def add_camel_aliases(cls, names=None):
    """Give ``cls`` the TF.js spellings of its public snake_case attributes (``names``, or
    all of those its classes define), where nothing of that name exists yet."""
    if names is None:
        names = {n for c in cls.__mro__ if c is not object for n in vars(c)}
    for snake in names:
        if snake[:1] == "_" or "_" not in snake and snake not in _UNSPECIAL:
            continue
        if isinstance(_static(cls, snake), CamelAlias):
            continue
        for camel in camel_spellings(snake):
            if _static(cls, camel) is None:
                setattr(cls, camel, CamelAlias(snake))


def _static(cls, name):
    for c in cls.__mro__:
        if name in vars(c):
            return vars(c)[name]
    return None


class CamelCase:
    """Base of the classes with TF.js spellings (Tensor, the optimizers, tf.engine()'s
    facade): ``x.matMul`` is ``x.mat_mul``, for the attributes a class or subclass defines
    (``add_camel_aliases`` for those added later), and ``dir()`` shows the snake_case
    names only."""
    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        add_camel_aliases(cls, set(vars(cls)))

    def __dir__(self):
        cls = type(self)
        return sorted(n for n in set(object.__dir__(self)) - {"__weakref__"}
                      if not isinstance(_static(cls, n), CamelAlias))


def camel_attribute(obj, name):
    """``__getattr__`` for classes with TF.js names: ``obj.startScope`` is
    ``obj.start_scope``; anything else is an AttributeError naming the class."""
    if name[:1] != "_":             # (dunder probes such as hasattr(t, "__await__"): fast)
        snake = camel_to_snake(name)
        if snake != name:
            try:
                return object.__getattribute__(obj, snake)
            except AttributeError:
                pass
    raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")


class Result:
    """A small result object: attributes, ``r["key"]``, camelCase keys, and unpacking.

    >>> r = Result(value=1, grads=[2])
    >>> value, grads = r
    >>> r.value, r["grads"], r.grads == grads
    (1, [2], True)
    """
    _fields = ()

    def __init__(self, **fields):
        object.__setattr__(self, "_fields", tuple(fields))
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __getattr__(self, name):
        if name[:2] == "__":            # (hasattr(r, "__await__") in every tidy: at once)
            raise AttributeError(name)
        snake = camel_to_snake(name)
        if snake != name and snake in self._fields:
            return object.__getattribute__(self, snake)
        raise AttributeError(f"{type(self).__name__} has no attribute '{name}' "
                             f"(it has {', '.join(self._fields)})")

    def __getitem__(self, key):
        if isinstance(key, int):
            return getattr(self, self._fields[key])
        return getattr(self, key)

    def __iter__(self):
        return iter(tuple(getattr(self, k) for k in self._fields))

    def __len__(self):
        return len(self._fields)

    def keys(self):
        return list(self._fields)

    def __flowgrad_tensors__(self):
        return [getattr(self, k) for k in self._fields]

    def __repr__(self):
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({inner})"


class Namespace:
    """A public sub-namespace (``tf.losses``, ``tf.image``, ``tf.linalg``): its functions
    as attributes, TF.js camelCase names resolving to them.

    >>> ns = Namespace("demo", {"mean_squared_error": len})
    >>> ns.meanSquaredError is len
    True
    """

    def __init__(self, name, functions):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_functions", functions)

    def __getattr__(self, attr):
        f = self._functions
        if attr in f:
            return f[attr]
        snake = camel_to_snake(attr)
        if snake in f:
            return f[snake]
        raise AttributeError(f"'tf.{self._name}' has no function '{attr}'")

    def __dir__(self):
        return sorted(self._functions)

    def __repr__(self):
        return f"<flowgrad namespace tf.{self._name}: {', '.join(sorted(self._functions))}>"
