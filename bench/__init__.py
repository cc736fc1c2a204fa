"""dtbench's harness. It knows no framework: it never imports torch or tensorflow."""
