"""This broker as a member of a cluster whose metadata lives in etcd (``etcd.connect``): its session and
registration, the metadata image it follows, the read view handlers answer from, and how the local data follows the
image. Without ``etcd.connect`` none of it runs and the broker is a single node with its embedded metadata."""
