#ifndef SL_VERSION_H
#define SL_VERSION_H
#define SL_VERSION "0.1.0"
/* Bumped whenever what the sensor observes or how it maps events changes: acceptances made on
 * another sensor version are stale. */
#define SL_SENSOR_VERSION "native-notify/2"
/* The gVisor sensor (the Sentry's points through the remote sink, src/sensor/gvisor_*.c). */
#define SL_GVISOR_SENSOR_VERSION "gvisor-remote/1"
#endif
