// placeholder (filled in below)
