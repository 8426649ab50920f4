// The VipsSource every load reads: the daemon's descriptor, read with pread, stopped by a cancel.
#include "shim_private.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

// The reader behind shim_source_for_fd: its own duplicate of the descriptor, read with pread at
// its own position (the offset of an open file is shared with every copy of the descriptor,
// the daemon's included), and a render's cancel request. libvips reads a source from one
// thread at a time but from several threads in turn, ordered by its own (GLib) locks, which
// ThreadSanitizer cannot see; `lock` orders our state where it can.
typedef struct {
    pthread_mutex_t lock;
    int fd;
    gint64 position;
    vs_cancel *cancel;
} fd_reader;

static gint64 fd_read(VipsSourceCustom *custom, void *buffer, gint64 length, fd_reader *reader) {
    (void)custom;
    // libvips checks a pipeline's kill flag between regions, and one region of a large PNG or
    // a progressive JPEG shrunk to a thumbnail is the whole decode: the codec's reads are
    // where a cancel can reach inside it.
    if (reader->cancel && vs_cancel_requested(reader->cancel)) {
        vips_error("viewerd", "cancelled");
        return -1;
    }
    pthread_mutex_lock(&reader->lock);
    ssize_t n;
    do n = pread(reader->fd, buffer, (size_t)length, (off_t)reader->position); while (n < 0 && errno == EINTR);
    if (n > 0) reader->position += n;
    pthread_mutex_unlock(&reader->lock);
    return n;
}

static gint64 fd_seek(VipsSourceCustom *custom, gint64 offset, int whence, fd_reader *reader) {
    (void)custom;
    pthread_mutex_lock(&reader->lock);
    gint64 base = reader->position, result = -1;
    struct stat st;
    if (whence == SEEK_SET) base = 0;
    if (whence == SEEK_END) base = fstat(reader->fd, &st) == 0 ? st.st_size : -1;
    if (base >= 0 && base + offset >= 0) result = reader->position = base + offset;
    pthread_mutex_unlock(&reader->lock);
    return result;
}

static void fd_reader_free(gpointer data, GObject *finalized) {
    (void)finalized;
    fd_reader *reader = data;
    close(reader->fd);
    pthread_mutex_destroy(&reader->lock);
    g_free(reader);
}

// A source reading the file open on `fd` from its start; reads fail once `cancel` (may be
// NULL) is requested.
VipsSource *shim_source_for_fd(int fd, vs_cancel *cancel) {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        vips_error("viewerd", "cannot duplicate the descriptor: %s", g_strerror(errno));
        return NULL;
    }
    fd_reader *reader = g_new0(fd_reader, 1);
    pthread_mutex_init(&reader->lock, NULL);
    reader->fd = copy;
    reader->cancel = cancel;
    VipsSourceCustom *custom = vips_source_custom_new();
    g_signal_connect(custom, "read", G_CALLBACK(fd_read), reader);
    g_signal_connect(custom, "seek", G_CALLBACK(fd_seek), reader);
    g_object_weak_ref(G_OBJECT(custom), fd_reader_free, reader);
    return VIPS_SOURCE(custom);
}
