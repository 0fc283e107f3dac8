// OpenCatalogue: local paths through core/catalogue (OpenLocalCatalogue),
// remote objects through core/remote.
#include "fs/source_opening.h"

#include <string>

#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

namespace stfs {

StatusOr<Catalogue> OpenCatalogue(const CommandLine& cl) {
#ifdef STFS_HAVE_REMOTE
  if (IsRemoteLocation(cl.source)) {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenRemoteSource(cl.source, cl.remote));
    return Catalogue::FromFile(std::move(source));
  }
#endif
  if (cl.source.find("://") != std::string::npos) {
    return Status::NotSupported(cl.source + ": remote sources are not supported by this build");
  }
  return OpenLocalCatalogue(cl.source);
}

}  // namespace stfs
