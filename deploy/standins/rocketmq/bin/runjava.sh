#!/bin/bash
# runjava.sh HEAP_OPTS LOGBACK MAIN ARGS...: the stand-in's one launcher, as upstream's
# runserver.sh, runbroker.sh and tools.sh do it: its defaults first, then JAVA_OPT_EXT (the
# JVM keeps the last of a repeated flag), the jars of lib/, ROCKETMQ_HOME for conf/tools.yml.
heap="$1" logback="$2" main="$3"
shift 3
# shellcheck disable=SC2086 # option lists
exec java -server $heap -XX:+UseSerialGC \
	-Duser.home=/home/rocketmq -Drocketmq.home.dir="$ROCKETMQ_HOME" -Drmq.logback.configurationFile="$logback" \
	--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED \
	--add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED \
	--add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/sun.nio.ch=ALL-UNNAMED \
	${JAVA_OPT_EXT:-} -cp "$ROCKETMQ_HOME/lib/*" "$main" "$@"
