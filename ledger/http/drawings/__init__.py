"""Pure layouts the dashboard draws as inline SVG: data in, coordinates out (no I/O); the
SVG text itself is in the templates."""
