"""Pure-Python stand-in for v0.14's compiled `tensordict._C` (four key helpers), used by
run_v014.sh only when no C++ compiler or Python headers can build the real one."""


def _unravel_key_to_tuple(key):
    if isinstance(key, str):
        return (key,)
    if not isinstance(key, tuple):
        return ()
    out = []
    for part in key:
        if isinstance(part, str):
            out.append(part)
            continue
        flat = _unravel_key_to_tuple(part)
        if not flat:
            return ()
        out.extend(flat)
    return tuple(out)


def unravel_key(key):
    if isinstance(key, str):
        return key
    if not isinstance(key, tuple):
        raise RuntimeError("key should be a Sequence<NestedKey>")
    out = []
    for part in key:
        out.extend((part,) if isinstance(part, str) else _unravel_key_to_tuple(part))
    return out[0] if len(out) == 1 else tuple(out)


unravel_keys = unravel_key


def unravel_key_list(keys):
    return [unravel_key(key) for key in keys]
