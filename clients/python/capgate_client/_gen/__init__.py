"""Generated from proto/ by scripts/gen_python.py; do not edit."""
