"""`specserve-launch`, the SGLang image's entrypoint: entry (stop signals before anything
starts), launcher (validate, render, print), server_parser (the image's own SGLang parser on the
rendered argv), supervise (SGLang as a child, signals forwarded, zombies reaped) and logtee (its
output to stdout and a rotated file, secrets redacted).

It sits above the profile library and reads from it; nothing in specserve.profile imports it.
"""
