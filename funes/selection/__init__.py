"""Tool selection: message -> frozen Decision. Decides, never acts."""
