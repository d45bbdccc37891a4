#!/bin/bash
python3 -m pytest "$TEST_DIR/test_outputs.py" -v
