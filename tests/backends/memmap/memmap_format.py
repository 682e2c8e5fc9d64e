"""Names of Python tensordict's (v0.14) memmap format shared by the two independent test
scripts (make_fixtures.py writes the format, check_written.py reads it), following
docs/compatibility.md: the stored class names and the key to file name encoding."""

TD_TYPE = "<class 'tensordict._td.TensorDict'>"
NTD_TYPE = "<class 'tensordict.tensorclass.NonTensorData'>"
NTS_TYPE = "<class 'tensordict.tensorclass.NonTensorStack'>"


def encode_key(key):
    """Python tensordict's _encode_key_for_filesystem."""
    if key == "":
        return "%"
    if key == ".":
        return "%2E"
    if key == "..":
        return "%2E%2E"
    return "".join("%%%02X" % ord(c) if (c in '/<>:"|?*\\ %' or ord(c) < 0x20 or ord(c) == 0x7F) else c
                   for c in key)
