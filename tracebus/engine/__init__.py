"""The queue engine: messages, actors, the Redis Streams broker, workers, the supervisor, middleware.

The bottom layer of tracebus. It knows nothing of jobs, applications or HTTP: an actor is a
function with a queue and options, a message runs on some worker, and every feature around
running it (retries, time limits, an application's hooks) is a middleware.
"""
