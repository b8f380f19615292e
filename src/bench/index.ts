/** Where an evaluation's scenarios and images come from: the built-in suite built from this repository. */
export { ProjectImages, type ProjectImagesOptions } from "./project-images.js";
