#!/bin/sh
# A binary without paired output (built without --paired support).
echo "usage: silent"
